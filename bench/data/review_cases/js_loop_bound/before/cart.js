// Totals for the shopping cart page.

function lineTotal(line) {
  return line.price * line.quantity;
}

function cartTotal(lines) {
  let total = 0;
  for (const line of lines) {
    total += lineTotal(line);
  }
  return Math.round(total * 100) / 100;
}

module.exports = { lineTotal, cartTotal };
