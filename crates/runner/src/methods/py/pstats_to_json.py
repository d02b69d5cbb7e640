import json, pstats, sys
st = pstats.Stats(sys.argv[1])
rows = [[f, l, n, cc, nc, tt, ct] for (f, l, n), (cc, nc, tt, ct, _) in st.stats.items()]
with open(sys.argv[2], 'w') as out:
    json.dump(rows, out)
