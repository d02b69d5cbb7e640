import ast, json, os, sys
import line_profiler
stats_path, script, qualname, out = sys.argv[1:5]
src = open(script, encoding="utf-8", errors="replace").read()
lines_of_src = src.splitlines()
first = set()
def walk(body, prefix):
    for n in body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            q = prefix + n.name
            if q == qualname and not isinstance(n, ast.ClassDef):
                first.add(n.lineno)
                first.update(d.lineno for d in n.decorator_list)
            walk(n.body, q + ".")
walk(ast.parse(src).body, "")
st = line_profiler.load_stats(stats_path)
name = qualname.rsplit(".", 1)[-1]
result = {"function": qualname, "file": os.path.abspath(script), "lines": []}
for (f, line, fname), rows in st.timings.items():
    same_file = os.path.abspath(f) == os.path.abspath(script) or os.path.basename(f) == os.path.basename(script)
    if same_file and fname == name and (not first or line in first):
        for lineno, hits, t in rows:
            text = lines_of_src[lineno - 1] if 0 < lineno <= len(lines_of_src) else ""
            result["lines"].append([lineno, hits, t * st.unit, text])
json.dump(result, open(out, "w"))
