// Human-readable sizes for the file list.

const UNITS = ["B", "KB", "MB", "GB", "TB"];

function formatSize(bytes) {
  let unit = 0;
  let value = bytes;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${UNITS[unit]}`;
}

module.exports = { formatSize, fmt: formatSize };
