"""Invoice totals."""

VAT = 0.2


def invoice_total(lines):
    net = 0
    for line in lines:
        net += line["unit_price"] * line["quantity"]
    vat = round(net * VAT, 2)
    return {"net": round(net, 2), "vat": vat, "gross": round(net + vat, 2)}
