"""cpu_hotspot.py after the fix the report recommends: busy() no longer loops.

i * i % 7 depends only on i % 7, so the sum is whole periods of 7 plus a remainder.
"""
import sys

PATTERN = [i * i % 7 for i in range(7)]


def busy(n):
    whole, rest = divmod(n, 7)
    return whole * sum(PATTERN) + sum(PATTERN[:rest])


def tokenize_words(text):
    return [w.strip(".,;:").lower() for w in text.split()]


def main(rounds=20):
    text = "The quick brown fox jumps over the lazy dog; again, and again. " * 200
    checksum = 0
    for _ in range(rounds):
        checksum += busy(200_000)
        checksum += len(tokenize_words(text))
    print(checksum)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
