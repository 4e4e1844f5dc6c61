import type { FastifyInstance } from 'fastify';
import type { UsageUnit } from '../services/usage.js';
import { barChart, quotaMeter } from './chart.js';
import { page, projectOf, type DashboardDeps } from './context.js';

/** The ranges offered above the chart: hourly for the last two days, daily beyond. */
const RANGES: Record<string, { unit: UsageUnit; count: number; label: string }> = {
  '48h': { unit: 'hour', count: 48, label: '48 hours' },
  '14d': { unit: 'day', count: 14, label: '14 days' },
  '30d': { unit: 'day', count: 30, label: '30 days' },
  '90d': { unit: 'day', count: 90, label: '90 days' },
};

export async function usageRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  app.get<{ Params: { id: string } }>('/projects/:id/usage', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const requested = (request.query as Record<string, unknown>).range;
    const rangeKey = typeof requested === 'string' && requested in RANGES ? requested : '30d';
    const range = RANGES[rangeKey]!;
    const [series, usage] = await Promise.all([
      deps.usage.series(project.id, range.unit, range.count),
      deps.usage.forProject(project),
    ]);
    const now = Date.now();
    return page(request, reply, deps, 'usage', {
      title: `Usage · ${project.name}`,
      project,
      tab: 'usage',
      ranges: RANGES,
      rangeKey,
      series,
      chart: barChart(series),
      usage,
      meter: usage.quota === null ? null : quotaMeter(usage.quota, now),
    });
  });
}
