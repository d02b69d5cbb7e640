"""Insert 3,000 rows into an on-disk SQLite database with a commit each, synchronous=FULL:
every commit waits for the disk (fsync)."""
import os
import sqlite3

PATH = "commits.db"


def main():
    if os.path.exists(PATH):
        os.unlink(PATH)
    db = sqlite3.connect(PATH)
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT, value REAL)")
    for i in range(3000):
        db.execute("INSERT INTO events (name, value) VALUES (?, ?)", (f"e{i}", i * 0.5))
        db.commit()
    db.close()
    os.unlink(PATH)


if __name__ == "__main__":
    main()
