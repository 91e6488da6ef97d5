// Links from the sidebar into the search page.

const BASE = "https://example.org";

function searchLink(query, tag) {
  let link = `${BASE}/search?q=${encodeURIComponent(query)}`;
  if (tag) {
    link += "&tag=" + tag;
  }
  return link;
}

module.exports = { searchLink };
