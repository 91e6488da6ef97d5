"""Read the column names of CSV exports."""

import csv


def read_header(path):
    handle = open(path, newline="", encoding="utf-8")
    row = next(csv.reader(handle), None)
    if not row:
        return []
    names = [name.strip() for name in row]
    handle.close()
    return names


def same_columns(paths):
    headers = [read_header(p) for p in paths]
    return all(h == headers[0] for h in headers)
