"""Parse JSON records in a process pool the way its documentation's example maps a function:
`ProcessPoolExecutor.map` (standard library) over one record at a time, with the default
chunksize of 1 unless POOL_CHUNKSIZE says otherwise (the truth's A/B sets it)."""
import json
import os
from concurrent.futures import ProcessPoolExecutor

RECORDS = [json.dumps({"id": i, "name": f"item-{i}", "tags": ["a", "b"], "price": i * 0.5})
           for i in range(40_000)]


def parse(line):
    return json.loads(line)["price"]


def main():
    chunksize = int(os.environ.get("POOL_CHUNKSIZE", "1"))
    with ProcessPoolExecutor(2) as pool:
        print(sum(pool.map(parse, RECORDS, chunksize=chunksize)))


if __name__ == "__main__":
    main()
