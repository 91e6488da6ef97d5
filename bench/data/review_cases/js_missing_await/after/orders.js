// Order lookups for the support tool.

async function loadOrder(db, id) {
  const order = await db.orders.findOne({ id });
  if (!order) {
    throw new Error(`no order ${id}`);
  }
  return order;
}

async function customerOf(db, orderId) {
  const order = await loadOrder(db, orderId);
  const customer = db.customers.findOne({ id: order.customerId });
  if (!customer) {
    return null;
  }
  return { name: customer.name, email: customer.email };
}

module.exports = { loadOrder, customerOf };
