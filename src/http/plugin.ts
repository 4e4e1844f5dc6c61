import type { FastifyInstance } from 'fastify';
import type { Services } from '../compose.js';

/** Registers more routes (the dashboard) on the api role's server, over the same services. */
export type HttpPlugin = (app: FastifyInstance, services: Services) => Promise<void>;
