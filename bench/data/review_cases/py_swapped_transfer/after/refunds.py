"""Refunds go back from the shop to the customer."""

from ledger import transfer

SHOP = "shop"


def refund(balances, order, amount=None):
    """Refund the whole order, or `amount` of it for a partial refund."""
    amount = order["total"] if amount is None else amount
    transfer(balances, order["customer"], SHOP, amount)
    order["refunded"] = order.get("refunded", 0) + amount
    order["status"] = "refunded" if order["refunded"] >= order["total"] else "partly refunded"
    return order
