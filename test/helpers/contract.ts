import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';

/**
 * Holds responses to the OpenAPI document they claim to follow (product.md §6): for each response
 * to an operation the document describes, the status code must be listed (exactly or as `4XX`),
 * and the body and the described headers must match their schemas. Responses to what the document
 * does not describe (a wrong method, a path outside the API) are not its business.
 */

interface OpenApiResponse {
  readonly headers?: Record<string, { readonly schema: object }>;
  readonly content?: Record<string, { readonly schema: object }>;
}

interface OpenApiDocument {
  readonly paths: Record<string, Record<string, { readonly responses: Record<string, OpenApiResponse> }>>;
}

interface Operation {
  readonly method: string;
  readonly pattern: RegExp;
  readonly path: string;
  readonly responses: Record<string, OpenApiResponse>;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export class ContractChecker {
  private readonly operations: Operation[] = [];
  private readonly ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
  private readonly compiled = new Map<object, ValidateFunction>();
  /** Problems found so far, one line each. */
  readonly problems: string[] = [];
  /** How many responses were checked against an operation. */
  checked = 0;

  constructor(document: unknown) {
    for (const [path, methods] of Object.entries((document as OpenApiDocument).paths)) {
      const pattern = new RegExp(
        `^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/?]+')}(?:\\?.*)?$`,
      );
      for (const [method, operation] of Object.entries(methods))
        this.operations.push({ method: method.toUpperCase(), pattern, path, responses: operation.responses });
    }
  }

  /** Checks one response; returns its problem, or null when it follows the document. */
  check(method: string, url: string, response: LightMyRequestResponse): string | null {
    const operation = this.operations.find((o) => o.method === method && o.pattern.test(url));
    if (operation === undefined) return null;
    this.checked++;
    const problem = this.problemOf(operation, response);
    if (problem !== null) this.problems.push(`${method} ${url} → ${response.statusCode}: ${problem}`);
    return problem;
  }

  private problemOf(operation: Operation, response: LightMyRequestResponse): string | null {
    const code = String(response.statusCode);
    const described =
      operation.responses[code] ?? operation.responses[`${code[0]}XX`] ?? operation.responses.default;
    if (described === undefined) return `status ${code} is not in the document for ${operation.path}`;
    for (const [name, header] of Object.entries(described.headers ?? {})) {
      const value = response.headers[name.toLowerCase()];
      if (value === undefined) continue;
      const typed = (header.schema as { type?: string }).type === 'integer' ? Number(value) : value;
      const error = this.validate(header.schema, typed);
      if (error !== null) return `header ${name}: ${error}`;
    }
    const schema = described.content?.['application/json']?.schema;
    if (schema === undefined) return null;
    if (!/^application\/json\b/.test(String(response.headers['content-type'])))
      return `content type ${String(response.headers['content-type'])} where JSON is described`;
    let body: unknown;
    try {
      body = JSON.parse(response.body);
    } catch {
      return 'the body is not JSON';
    }
    const error = this.validate(schema, body);
    return error === null ? null : `body ${response.body.slice(0, 200)}: ${error}`;
  }

  private validate(schema: object, value: unknown): string | null {
    let validate = this.compiled.get(schema);
    if (validate === undefined) {
      // Response schemas say which fields exist; the document leaves extra ones open, but Herald's
      // serializers never send a field the schema does not name, so the check closes them.
      validate = this.ajv.compile(closeObjects(schema) as object);
      this.compiled.set(schema, validate);
    }
    return validate(value) ? null : this.ajv.errorsText(validate.errors);
  }
}

/** A copy of a schema in which every object with named properties allows no others. */
function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) out[key] = closeObjects(value);
  if (out.type === 'object' && out.properties !== undefined && out.additionalProperties === undefined)
    out.additionalProperties = false;
  return out;
}

/** The method and URL an inject call asked for. */
export function injected(options: InjectOptions | string): { method: string; url: string } {
  if (typeof options === 'string') return { method: 'GET', url: options };
  const url = typeof options.url === 'string' ? options.url : String(options.url?.pathname ?? options.path);
  return { method: (options.method ?? 'GET').toUpperCase(), url };
}
