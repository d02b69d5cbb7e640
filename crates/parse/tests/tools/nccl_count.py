#!/usr/bin/env python3
# Usage: python3 crates/parse/tests/tools/nccl_count.py crates/parse/tests/data/nccl_debug/*.txt
# Independent count over the same logs, for the parser test's expected numbers.
import re,sys,collections
for f in sys.argv[1:]:
    t=open(f,errors='replace').read().splitlines()
    coll=collections.Counter(); byts=0
    trans=collections.Counter(); pairs=collections.defaultdict(set)
    comms=set(); ranks=collections.defaultdict(set)
    for l in t:
        m=re.search(r'NCCL INFO (\w+): opCount \S+ sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+)',l)
        if m: coll[m.group(1)]+=1; byts+=int(m.group(2))*4
        m=re.search(r'NCCL INFO Channel \d+/\d+ : (\d+)\[\d+\] -> (\d+)\[\d+\].* via (.*)$',l)
        if m: trans[m.group(3).strip()]+=1; pairs[m.group(3).strip()].add((m.group(1),m.group(2)))
        m=re.search(r'ncclCommInitRankConfig comm \S+ rank (\d+) nranks (\d+).*commId (\S+) - Init COMPLETE',l)
        if m: comms.add(m.group(3)); ranks[m.group(3)].add(m.group(1))
    print(f.split('/')[-1], dict(coll), byts, {k:(v,len(pairs[k])) for k,v in trans.items()}, len(comms), sorted(len(v) for v in ranks.values()))
