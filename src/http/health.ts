import type { FastifyInstance } from 'fastify';
import type { Storage } from '../storage/storage.js';
import { VERSION } from '../version.js';

/** `/healthz`: the process is alive, and which Herald it is. `/readyz`: it can reach its database and should get traffic. */
export async function healthRoutes(app: FastifyInstance, deps: { storage: Storage }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok', version: VERSION }));
  app.get('/readyz', async (_request, reply) => {
    try {
      await deps.storage.ping();
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'unavailable', error: 'database unreachable' });
    }
  });
}
