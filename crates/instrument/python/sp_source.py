# The instrument crate's questions to the target's interpreter, one JSON request per line on
# stdin, one JSON answer per line on stdout. Only the standard library; run with -I.
import ast, base64, io, json, sys, tokenize, warnings

def nodes_with_bodies(node):
    for field in ("body", "orelse", "finalbody"):
        b = getattr(node, field, None)
        if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
            yield b
    for h in getattr(node, "handlers", None) or []:
        yield h.body
    for c in getattr(node, "cases", None) or []:
        yield c.body

def first_line(n):
    return min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])])

def is_docstring(n):
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)

def escapes(stmts, in_loop=False):
    """return/break/continue that would leave a block before its end (not in nested scopes)."""
    found = set()
    def walk(n, loop):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(n, ast.Return):
            found.add("return")
        elif isinstance(n, (ast.Break, ast.Continue)) and not loop:
            found.add(type(n).__name__.lower())
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            for k in n.body:
                walk(k, True)
            for k in n.orelse:
                walk(k, loop)
            return
        for k in ast.iter_child_nodes(n):
            walk(k, loop)
    for s in stmts:
        walk(s, in_loop)
    return sorted(found)

def is_generator(fn):
    for n in ast.walk(fn):
        if n is not fn and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return True
    return False

def starts_line(lines, n):
    """Whether statement n is the first thing on its line (not after a `;` or a header's `:`)."""
    line = lines[n.lineno - 1] if n.lineno - 1 < len(lines) else b""
    return not line[:n.col_offset].strip()

def functions(tree, lines):
    out = []
    def visit(body, prefix):
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = prefix + n.name
                if not isinstance(n, ast.ClassDef):
                    stmts = n.body
                    doc = is_docstring(stmts[0])
                    rest = stmts[1:] if doc else stmts
                    out.append({
                        "qualname": q, "first_line": first_line(n), "def_line": n.lineno,
                        "end_line": n.end_lineno, "is_async": isinstance(n, ast.AsyncFunctionDef),
                        "is_generator": is_generator(n),
                        "body_line": stmts[0].lineno,
                        "code_start": first_line(rest[0]) if rest else None,
                        "code_end": rest[-1].end_lineno if rest else None,
                        "body_escapes": escapes(rest),
                        "one_line": not starts_line(lines, n.body[0]),
                    })
                    visit(n.body, q + ".<locals>.")
                else:
                    visit(n.body, q + ".")
            else:
                for b in nodes_with_bodies(n):
                    visit(b, prefix)
    visit(tree.body, "")
    return out

def import_line(tree):
    """The line before which the helper import goes: after the docstring and __future__."""
    body = tree.body
    i = 0
    if body and is_docstring(body[0]):
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":
        i += 1
    if i == len(body):
        return None, (body[-1].end_lineno if body else 0)
    prev_end = body[i - 1].end_lineno if i else 0
    start = first_line(body[i])
    if start <= prev_end:
        return -1, prev_end
    return start, prev_end

def normalized(src):
    return src.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

def string_lines(src):
    """Lines that begin inside a string literal: re-indenting them would change the string."""
    lines = set()
    toks = tokenize.tokenize(io.BytesIO(normalized(src)).readline)
    fstart = []
    FS, FE = getattr(tokenize, "FSTRING_START", -1), getattr(tokenize, "FSTRING_END", -2)
    for tok in toks:
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            lines.update(range(tok.start[0] + 1, tok.end[0] + 1))
        elif tok.type == FS:
            fstart.append(tok.start[0])
        elif tok.type == FE and fstart:
            s = fstart.pop()
            if not fstart and tok.end[0] > s:
                lines.update(range(s + 1, tok.end[0] + 1))
    return sorted(lines)

def parse(path):
    with open(path, "rb") as f:
        src = f.read()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return src, ast.parse(src, filename=path)

def analyze(req):
    src, tree = parse(req["path"])
    line, after = import_line(tree)
    guard = any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)
    return {"functions": functions(tree, normalized(src).split(b"\n")), "import_line": line, "import_after": after,
            "main_guard": guard}

def block(req):
    """The smallest run of whole statements of one body that covers [start, end]."""
    src, tree = parse(req["path"])
    lines = normalized(src).split(b"\n")
    start, end = req["start"], req["end"]
    body, scope, in_loop, scope_body = tree.body, "<module>", False, True
    while True:
        hit = [s for s in body if s.end_lineno >= start and first_line(s) <= end]
        if not hit:
            raise ValueError("lines %d-%d hold no statement (blank, comments, or past the end)" % (start, end))
        if len(hit) == 1:
            s = hit[0]
            inner = None
            for b in nodes_with_bodies(s):
                if first_line(b[0]) <= start and b[-1].end_lineno >= end and starts_line(lines, b[0]):
                    inner = b
            if inner is not None:
                scope_body = isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    scope, in_loop = (scope + "." if scope != "<module>" else "") + s.name, False
                elif isinstance(s, ast.ClassDef):
                    scope = (scope + "." if scope != "<module>" else "") + s.name
                elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)) and inner is s.body:
                    in_loop = True
                body = inner
                continue
        first, last = hit[0], hit[-1]
        i, j = body.index(first), body.index(last)
        # statements sharing a physical line with the run join it
        while i > 0 and body[i - 1].end_lineno >= first_line(body[i]):
            i -= 1
        while j + 1 < len(body) and first_line(body[j + 1]) <= body[j].end_lineno:
            j += 1
        if i == 0 and scope_body and is_docstring(body[0]):
            # code before a docstring would make it an ordinary string
            i += 1
            if i > j:
                raise ValueError("lines %d-%d are a docstring; give the lines after it" % (start, end))
        run = body[i:j + 1]
        if not starts_line(lines, run[0]):
            raise ValueError("line %d holds more than these statements; give whole lines" % run[0].lineno)
        s_line, e_line = first_line(run[0]), run[-1].end_lineno
        if any(isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in run):
            raise ValueError("lines %d-%d hold a __future__ import, which must stay first" % (s_line, e_line))
        return {"start": s_line, "end": e_line, "scope": scope,
                "escapes": escapes(run, in_loop),
                "string_lines": [l for l in string_lines(src) if s_line < l <= e_line]}

def compile_check(req):
    src = base64.b64decode(req["source_b64"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(src, req["path"], "exec", dont_inherit=True)
    return {}

def unmark(req):
    """Take change `id` out of source that others have edited since: delete the lines that
    carry its marker (and a snippet between its begin/end markers), and move the body of its
    `with` back out one level. Every other line stays as it is."""
    src = base64.b64decode(req["source_b64"])
    mark = ("# [PROFILE] " + req["id"]).encode()
    lines = src.splitlines(keepends=True)
    def tagged(line, suffix=b""):
        return line.rstrip(b"\r\n").rstrip().endswith(mark + suffix)
    dedent = {}
    for i, line in enumerate(lines, 1):
        if tagged(line) and line.lstrip().startswith(b"with _sp_profile.block("):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(src)
            node = next((n for n in ast.walk(tree) if isinstance(n, ast.With) and n.lineno == i), None)
            if node is None:
                raise ValueError("the marked with line %d is no longer a with statement" % i)
            indent = line[:len(line) - len(line.lstrip())]
            skip = set(string_lines(src))
            first = node.body[0].lineno
            unit = lines[first - 1][len(indent):len(lines[first - 1]) - len(lines[first - 1].lstrip())]
            if not unit:
                raise ValueError("the body of the marked with is not indented below it")
            for j in range(i + 1, node.end_lineno + 1):
                if j not in skip:
                    dedent[j] = (indent + unit, indent)
    out, inside = [], False
    for i, line in enumerate(lines, 1):
        if tagged(line, b" begin"):
            inside = True
            continue
        if tagged(line, b" end"):
            inside = False
            continue
        if inside or tagged(line):
            continue
        if i in dedent:
            deeper, base = dedent[i]
            if line.startswith(deeper):
                line = base + line[len(deeper):]
            elif line.strip():
                raise ValueError("line %d is no longer indented under the marked with" % i)
        out.append(line)
    return {"source_b64": base64.b64encode(b"".join(out)).decode()}

OPS = {"analyze": analyze, "block": block, "compile": compile_check, "unmark": unmark}

for raw in sys.stdin:
    try:
        req = json.loads(raw)
        answer = OPS[req["op"]](req)
        answer["ok"] = True
    except SyntaxError as e:
        answer = {"ok": False, "error": "%s at line %s: %s" % (type(e).__name__, e.lineno, e.msg), "line": e.lineno}
    except Exception as e:
        answer = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
