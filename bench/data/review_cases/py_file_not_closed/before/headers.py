"""Read the column names of CSV exports."""

import csv


def read_header(path):
    with open(path, newline="", encoding="utf-8") as handle:
        row = next(csv.reader(handle), None)
    return [name.strip() for name in row] if row else []


def same_columns(paths):
    headers = [read_header(p) for p in paths]
    return all(h == headers[0] for h in headers)
