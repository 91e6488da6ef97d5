"""Invoice totals."""

VAT = 0.2


def net_amount(lines):
    return sum(line["unit_price"] * line["quantity"] for line in lines)


def invoice_total(lines):
    net = net_amount(lines)
    vat = round(net * VAT, 2)
    return {"net": round(net, 2), "vat": vat, "gross": round(net + vat, 2)}
