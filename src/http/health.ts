import type { FastifyInstance } from 'fastify';
import type { AcceptService } from '../services/accept.js';
import type { Storage } from '../storage/storage.js';
import { VERSION } from '../version.js';

/**
 * `/healthz`: the process is alive, and which Herald it is. `/readyz`: it can reach its database,
 * and the database takes its writes (a full disk refuses every send), so it should get traffic.
 */
export async function healthRoutes(
  app: FastifyInstance,
  deps: { storage: Storage; accept: Pick<AcceptService, 'takesWrites'> },
): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok', version: VERSION }));
  app.get('/readyz', async (_request, reply) => {
    try {
      await deps.storage.ping();
    } catch {
      return reply.code(503).send({ status: 'unavailable', error: 'database unreachable' });
    }
    if (!(await deps.accept.takesWrites()))
      return reply.code(503).send({ status: 'unavailable', error: 'database refuses writes' });
    return { status: 'ready' };
  });
}
