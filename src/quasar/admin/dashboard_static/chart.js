// A small line chart of recent samples, drawn as SVG. Each series keeps its last
// `capacity` values; every draw rescales the y axis to the largest value shown.
const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 600;
const HEIGHT = 180;
const LEFT = 48; // room for the y-axis labels
const BOTTOM = 16;

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

export function formatNumber(value) {
  if (!Number.isFinite(value)) return "–";
  const abs = Math.abs(value);
  if (abs >= 1e9) return (value / 1e9).toFixed(1) + "G";
  if (abs >= 1e6) return (value / 1e6).toFixed(1) + "M";
  if (abs >= 1e4) return (value / 1e3).toFixed(1) + "k";
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(abs >= 100 ? 0 : 1);
}

export class LineChart {
  // series: [{name, color}]; capacity: how many samples the chart keeps.
  constructor(element, series, capacity = 90) {
    this.element = element;
    this.capacity = capacity;
    this.series = series.map((s) => ({ ...s, values: [] }));
    this.samples = 0;
  }

  // One value per series, in the order the series were given.
  push(values) {
    this.series.forEach((s, i) => {
      s.values.push(Number(values[i]) || 0);
      if (s.values.length > this.capacity) s.values.shift();
    });
    this.samples += 1;
    this.draw();
  }

  draw() {
    const el = this.element;
    while (el.firstChild) el.removeChild(el.firstChild);
    const plotW = WIDTH - LEFT;
    const plotH = HEIGHT - BOTTOM;
    let max = 0;
    for (const s of this.series) for (const v of s.values) max = Math.max(max, v);
    const top = max > 0 ? max * 1.1 : 1;
    el.appendChild(svg("line", { class: "axis", x1: LEFT, y1: plotH, x2: WIDTH, y2: plotH }));
    el.appendChild(svg("line", { class: "axis", x1: LEFT, y1: 0, x2: LEFT, y2: plotH }));
    for (const [y, value] of [[12, top], [plotH, 0]]) {
      const label = svg("text", { x: LEFT - 4, y, "text-anchor": "end" });
      label.textContent = formatNumber(value);
      el.appendChild(label);
    }
    const step = plotW / Math.max(1, this.capacity - 1);
    this.series.forEach((s, i) => {
      const start = this.capacity - s.values.length;
      const points = s.values
        .map((v, j) => `${(LEFT + (start + j) * step).toFixed(1)},${(plotH - (v / top) * plotH).toFixed(1)}`)
        .join(" ");
      el.appendChild(svg("polyline", { points, stroke: s.color, "data-series": s.name }));
      const last = s.values.length ? s.values[s.values.length - 1] : 0;
      const legend = svg("text", { x: LEFT + 8 + i * 150, y: HEIGHT - 2, fill: s.color });
      legend.textContent = `${s.name}: ${formatNumber(last)}`;
      el.appendChild(legend);
    });
    // The latest values, for whoever reads the chart without looking at it.
    el.dataset.samples = String(this.samples);
    el.dataset.last = this.series.map((s) => s.values[s.values.length - 1] ?? 0).join(",");
  }
}
