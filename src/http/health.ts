import type { FastifyInstance } from 'fastify';
import type { Storage } from '../storage/storage.js';

/** `/healthz`: the process is alive. `/readyz`: it can reach its database and should get traffic. */
export async function healthRoutes(app: FastifyInstance, deps: { storage: Storage }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    try {
      await deps.storage.ping();
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'unavailable', error: 'database unreachable' });
    }
  });
}
