/**
 * A hand-written SVG bar chart: one group per figure, Herald's bar against its baseline's, each
 * group on its own scale (the units differ), with the goal drawn as a dashed mark on Herald's row.
 */
export interface ChartItem {
  title: string;
  unit: string;
  herald: { label: string; value: number };
  baseline: { label: string; value: number };
  /** Where the goal sits, as a value on this item's scale; `higherIsBetter` says which side meets it. */
  goal?: { value: number; label: string };
  higherIsBetter: boolean;
}

const WIDTH = 920;
const LEFT = 200;
const BAR_MAX = 520;
const BAR_H = 18;
const GROUP_H = 84;
const TOP = 64;

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function formatValue(value: number, unit: string): string {
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return `${value.toLocaleString('en-US', { maximumFractionDigits: digits })} ${unit}`;
}

function metText(item: ChartItem): { text: string; color: string } {
  if (item.goal === undefined) return { text: '', color: '#555' };
  const met = item.higherIsBetter
    ? item.herald.value >= item.goal.value
    : item.herald.value <= item.goal.value;
  const ratio =
    item.higherIsBetter && item.baseline.value > 0
      ? `${(item.herald.value / item.baseline.value).toFixed(2)}× · `
      : '';
  return met
    ? { text: `${ratio}goal met`, color: '#1a7f37' }
    : { text: `${ratio}goal not met`, color: '#cf222e' };
}

export function renderChart(items: ChartItem[], title: string, subtitle: string): string {
  const height = TOP + Math.max(1, items.length) * GROUP_H + 40;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="13">`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="20" y="28" font-size="18" font-weight="600" fill="#111">${escapeXml(title)}</text>`,
    `<text x="20" y="48" fill="#555">${escapeXml(subtitle)}</text>`,
  ];
  if (items.length === 0) {
    parts.push(`<text x="20" y="${TOP + 30}" fill="#555">No figure was measured.</text>`);
  }
  items.forEach((item, index) => {
    const y = TOP + index * GROUP_H;
    const scaleMax = Math.max(item.herald.value, item.baseline.value, item.goal?.value ?? 0) * 1.05 || 1;
    const width = (value: number) => Math.max(1, (value / scaleMax) * BAR_MAX);
    const met = metText(item);
    parts.push(`<text x="20" y="${y + 14}" font-weight="600" fill="#111">${escapeXml(item.title)}</text>`);
    if (met.text !== '') {
      parts.push(
        `<text x="${WIDTH - 20}" y="${y + 14}" text-anchor="end" fill="${met.color}" font-weight="600">${met.text}</text>`,
      );
    }
    // The goal mark goes first so that bars and value labels are drawn over it.
    if (item.goal !== undefined) {
      const x = LEFT + width(item.goal.value);
      parts.push(
        `<line x1="${x.toFixed(1)}" y1="${y + 20}" x2="${x.toFixed(1)}" y2="${y + 24 + 2 * BAR_H + 10}" stroke="#1f6feb" stroke-width="2" stroke-dasharray="4 3"/>`,
        `<text x="${x.toFixed(1)}" y="${y + 24 + 2 * BAR_H + 24}" text-anchor="middle" fill="#1f6feb" font-size="11">${escapeXml(item.goal.label)}</text>`,
      );
    }
    const rows: [string, number, string][] = [
      [item.herald.label, item.herald.value, '#d9480f'],
      [item.baseline.label, item.baseline.value, '#868e96'],
    ];
    rows.forEach(([label, value, color], row) => {
      const barY = y + 24 + row * (BAR_H + 6);
      parts.push(
        `<text x="${LEFT - 10}" y="${barY + 13}" text-anchor="end" fill="#333">${escapeXml(label)}</text>`,
        `<rect x="${LEFT}" y="${barY}" width="${width(value).toFixed(1)}" height="${BAR_H}" fill="${color}" rx="2"/>`,
        `<text x="${(LEFT + width(value) + 6).toFixed(1)}" y="${barY + 13}" fill="#333" stroke="#ffffff" stroke-width="4" paint-order="stroke">${escapeXml(formatValue(value, item.unit))}</text>`,
      );
    });
  });
  parts.push(
    `<text x="20" y="${height - 14}" fill="#777" font-size="11">Orange: Herald. Grey: baseline measured in the same run. Dashed blue: goal. Each figure has its own scale.</text>`,
    '</svg>',
  );
  return `${parts.join('\n')}\n`;
}
