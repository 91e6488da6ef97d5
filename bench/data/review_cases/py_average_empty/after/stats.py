"""Summary figures for the weekly report."""


def average(values):
    total = sum(values)
    return total / len(values)


def spread(values):
    if not values:
        return 0.0
    return max(values) - min(values)


def summary(samples):
    return {
        "mean": average(samples),
        "spread": spread(samples),
        "count": len(samples),
    }
