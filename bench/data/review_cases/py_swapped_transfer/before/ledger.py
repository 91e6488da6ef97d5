"""Balances kept in memory for the test bank."""


class InsufficientFunds(Exception):
    pass


def transfer(balances, source, target, amount):
    """Move `amount` from `source` to `target`."""
    if amount <= 0:
        raise ValueError("amount must be positive")
    if balances[source] < amount:
        raise InsufficientFunds(source)
    balances[source] -= amount
    balances[target] += amount
