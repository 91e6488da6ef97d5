// Order lookups for the support tool.

async function loadOrder(db, id) {
  const order = await db.orders.findOne({ id });
  if (!order) {
    throw new Error(`no order ${id}`);
  }
  return order;
}

module.exports = { loadOrder };
