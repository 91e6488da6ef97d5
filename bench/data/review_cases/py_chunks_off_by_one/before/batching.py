"""Split work into batches for the upload queue."""


def chunks(items, size):
    """Consecutive slices of at most `size` items, the last one possibly shorter."""
    if size <= 0:
        raise ValueError("size must be positive")
    out = []
    for start in range(0, len(items), size):
        out.append(items[start : start + size])
    return out


def upload_all(client, records, batch_size=50):
    sent = 0
    for batch in chunks(records, batch_size):
        client.send(batch)
        sent += len(batch)
    return sent
