#!/usr/bin/env python3
# -*- coding: latin-1 -*-
"""Modul für Tests: latin-1, CRLF, tabs, a BOM-less file without a final newline."""
from __future__ import annotations
import asyncio


class Außen:
	class Innen:
		@staticmethod
		def schritt(x):
			"""Doc."""
			text = """zeile
eins"""
			return len(text) + x


async def hole(n):
    await asyncio.sleep(0)
    return n


def main():
    total = 0
    for i in range(3):
        total += Außen.Innen.schritt(i)
    print(total, asyncio.run(hole(1)))


if __name__ == "__main__":
    main()