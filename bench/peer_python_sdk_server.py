"""Peer for the protocol benchmarks: the official MCP Python SDK's own stdio server
(mcp.server.mcpserver.MCPServer) with one small tool. Same client loop, same machine, same run."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("peer")


@server.tool()
def echo(text: str = "") -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
