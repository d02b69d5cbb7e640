"""Write the input of the json_tool scenario: a 37.5 MB JSON document like an API dump (a list
of records with nested objects, arrays, strings with escapes, integers and floats), the same
bytes on every run (a fixed seed), so `python -m json.tool` has the issue's file size to read
and re-indent. Ours; nothing of it is measured.

    python make_input.py big.json
"""
import json
import random
import sys

TARGET_BYTES = 37_500_000


def record(rng, i):
    return {
        "id": i,
        "uuid": "%032x" % rng.getrandbits(128),
        "name": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))),
        "active": rng.random() < 0.7,
        "score": round(rng.uniform(0, 1000), 3),
        "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 6))],
        "address": {
            "street": "%d %s St." % (rng.randint(1, 9999), rng.choice(WORDS).title()),
            "city": rng.choice(WORDS).title(),
            "zip": "%05d" % rng.randint(0, 99999),
            "geo": [round(rng.uniform(-90, 90), 6), round(rng.uniform(-180, 180), 6)],
        },
        "history": [
            {"t": 1_700_000_000 + rng.randint(0, 10**7), "event": rng.choice(EVENTS),
             "note": "\"%s\"\n\t%s" % (rng.choice(WORDS), rng.choice(WORDS))}
            for _ in range(rng.randint(0, 4))
        ],
        "notes": None if rng.random() < 0.5 else "é ü ß — %s" % rng.choice(WORDS),
    }


WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
         "rho sigma tau upsilon phi chi psi omega apple orange banana cherry lemon mango").split()
EVENTS = ["created", "updated", "deleted", "viewed", "shared", "archived"]


def main(path):
    rng = random.Random(20261206)
    with open(path, "w", encoding="utf-8") as f:
        f.write("[")
        written, i = 1, 0
        while written < TARGET_BYTES:
            text = ("," if i else "") + json.dumps(record(rng, i), ensure_ascii=False)
            f.write(text)
            written += len(text.encode("utf-8"))
            i += 1
        f.write("]\n")


if __name__ == "__main__":
    main(sys.argv[1])
