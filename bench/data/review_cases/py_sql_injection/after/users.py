"""Look-ups in the user table."""

import sqlite3


def connect(path):
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    return db


def find_by_email(db, email):
    cursor = db.execute("SELECT id, name FROM users WHERE email = ?", (email,))
    return cursor.fetchone()


def search_by_name(db, prefix, limit=20):
    query = f"SELECT id, name FROM users WHERE name LIKE '{prefix}%' LIMIT ?"
    return db.execute(query, (limit,)).fetchall()
