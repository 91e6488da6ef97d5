// Links from the sidebar into the search page.

const BASE = "https://example.org";

function searchLink(query) {
  return `${BASE}/search?q=${encodeURIComponent(query)}`;
}

module.exports = { searchLink };
