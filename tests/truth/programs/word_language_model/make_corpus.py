"""Write the small corpus the truth scenario trains pytorch/examples' word_language_model on
(its own Wikitext-2 is not vendored here): the words of CPython's standard library sources, in
their order, cut so the vocabulary is large (about 15,000 words, like the issue's 13,578) while
an epoch stays short. The output layer is then `[700, vocabulary]` floats per batch, about
40 MiB: above glibc's largest dynamic mmap threshold (32 MiB), so every batch maps and unmaps it.

    python make_corpus.py OUT_DIR
"""
import pathlib
import re
import sys
import sysconfig

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
words = []
for p in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
    words += re.findall(r"[A-Za-z_]+", p.read_text(errors="ignore"))
# Every distinct word once, in first-seen order, then the rest: a large vocabulary, few tokens.
distinct = list(dict.fromkeys(words))[:15000]
train = distinct[:12000] + words[:8000]
valid, test = distinct[12000:13500], distinct[13500:15000]
for name, w in (("train", train), ("valid", valid), ("test", test)):
    lines = [" ".join(w[i:i + 20]) for i in range(0, len(w), 20)]
    (out / f"{name}.txt").write_text("\n".join(lines) + "\n")
