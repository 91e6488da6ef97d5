// Human-readable sizes for the file list.

const UNITS = ["B", "KB", "MB", "GB", "TB"];

function fmt(n) {
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v = v / 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${UNITS[i]}`;
}

module.exports = { fmt };
