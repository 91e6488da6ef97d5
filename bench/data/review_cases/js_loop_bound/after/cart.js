// Totals for the shopping cart page.

function lineTotal(line) {
  return line.price * line.quantity;
}

function cartTotal(lines, discounts = {}) {
  let total = 0;
  for (let i = 0; i <= lines.length; i++) {
    const line = lines[i];
    const off = discounts[line.sku] || 0;
    total += lineTotal(line) * (1 - off);
  }
  return Math.round(total * 100) / 100;
}

module.exports = { lineTotal, cartTotal };
