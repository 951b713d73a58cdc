import { writeFileSync } from "node:fs";
import { chromium } from "playwright-core";

// Line charts of figures against a number of keys (log scale on x), drawn as SVG by hand (a handful of lines and
// labels needs no chart library) and turned into PNG by Debian's Chromium through playwright-core, which the tests
// already depend on.

export interface Series {
  label: string;
  points: { x: number; y: number }[];
}

export interface Chart {
  file: string;
  title: string;
  yLabel: string;
  // Default: the number of keys in the store.
  xLabel?: string;
  series: Series[];
  // A horizontal line for a target the figure must stay under (or over).
  target?: { y: number; label: string };
  logY?: boolean;
}

const W = 800;
const H = 480;
const M = { left: 80, right: 30, top: 50, bottom: 60 };
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

function escape(s: string): string {
  return s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

function niceTicks(min: number, max: number): number[] {
  const span = max - min || Math.abs(max) || 1;
  const step = 10 ** Math.floor(Math.log10(span / 5));
  const unit = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 6) ?? step * 10;
  const ticks: number[] = [];
  for (let t = Math.floor(min / unit) * unit; t <= max + unit / 2; t += unit) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

function formatNumber(v: number): string {
  if (Math.abs(v) >= 1e6) return `${v / 1e6}M`;
  if (Math.abs(v) >= 1e3) return `${v / 1e3}k`;
  return String(Number(v.toPrecision(3)));
}

export function svg(chart: Chart): string {
  const points = chart.series.flatMap((s) => s.points);
  const xs = points.map((p) => Math.log10(p.x));
  const xMin = Math.floor(Math.min(...xs));
  const xMax = Math.ceil(Math.max(...xs));
  const yValues = [...points.map((p) => p.y), ...(chart.target === undefined ? [] : [chart.target.y])];
  const ty = (v: number) => (chart.logY === true ? Math.log10(Math.max(v, 1e-9)) : v);
  let yMin = chart.logY === true ? Math.floor(Math.min(...yValues.map(ty))) : 0;
  let yMax = chart.logY === true ? Math.ceil(Math.max(...yValues.map(ty))) : Math.max(...yValues) * 1.1;
  if (yMax === yMin) yMax = yMin + 1;
  if (!Number.isFinite(yMin)) yMin = 0;
  const px = (x: number) => M.left + ((Math.log10(x) - xMin) / (xMax - xMin || 1)) * (W - M.left - M.right);
  const py = (y: number) => H - M.bottom - ((ty(y) - yMin) / (yMax - yMin)) * (H - M.top - M.bottom);
  const parts: string[] = [];
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(`<text x="${W / 2}" y="28" text-anchor="middle" font-size="18">${escape(chart.title)}</text>`);
  for (let e = xMin; e <= xMax; e++) {
    const x = px(10 ** e);
    parts.push(`<line x1="${x}" y1="${M.top}" x2="${x}" y2="${H - M.bottom}" stroke="#ddd"/>`);
    parts.push(`<text x="${x}" y="${H - M.bottom + 20}" text-anchor="middle" font-size="13">${formatNumber(10 ** e)}</text>`);
  }
  const yTicks = chart.logY === true ? Array.from({ length: yMax - yMin + 1 }, (_, i) => 10 ** (yMin + i)) : niceTicks(0, yMax);
  for (const t of yTicks) {
    const y = py(t);
    if (y < M.top - 1) continue;
    parts.push(`<line x1="${M.left}" y1="${y}" x2="${W - M.right}" y2="${y}" stroke="#ddd"/>`);
    parts.push(`<text x="${M.left - 8}" y="${y + 4}" text-anchor="end" font-size="13">${formatNumber(t)}</text>`);
  }
  parts.push(`<text x="${W / 2}" y="${H - 15}" text-anchor="middle" font-size="14">${escape(chart.xLabel ?? "keys in the store (log scale)")}</text>`);
  parts.push(`<text transform="translate(20 ${H / 2}) rotate(-90)" text-anchor="middle" font-size="14">${escape(chart.yLabel)}</text>`);
  if (chart.target !== undefined) {
    const y = py(chart.target.y);
    parts.push(`<line x1="${M.left}" y1="${y}" x2="${W - M.right}" y2="${y}" stroke="#888" stroke-dasharray="6 4"/>`);
    parts.push(`<text x="${W - M.right}" y="${y - 6}" text-anchor="end" font-size="12" fill="#555">${escape(chart.target.label)}</text>`);
  }
  chart.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const sorted = [...s.points].sort((a, b) => a.x - b.x);
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2.5" points="${sorted.map((p) => `${px(p.x)},${py(p.y)}`).join(" ")}"/>`);
    for (const p of sorted) parts.push(`<circle cx="${px(p.x)}" cy="${py(p.y)}" r="4" fill="${color}"/>`);
    parts.push(`<rect x="${M.left + 12}" y="${M.top + 8 + i * 20}" width="14" height="4" fill="${color}"/>`);
    parts.push(`<text x="${M.left + 32}" y="${M.top + 14 + i * 20}" font-size="13">${escape(s.label)}</text>`);
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif">${parts.join("")}</svg>`;
}

// Renders every chart to its PNG file with one browser.
export async function renderPngs(charts: Chart[]): Promise<void> {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: W, height: H } });
    for (const chart of charts) {
      await page.setContent(`<html><body style="margin:0">${svg(chart)}</body></html>`);
      writeFileSync(chart.file, await page.screenshot({ clip: { x: 0, y: 0, width: W, height: H } }));
    }
  } finally {
    await browser.close();
  }
}
