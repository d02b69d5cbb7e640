"""A small program with one obvious CPU hotspot, for trying system-profile by hand.

busy() burns CPU in pure Python; tokenize_words() is cheaper per call but called often;
main() runs both a few times and prints a checksum.
"""
import sys


def busy(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


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
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
