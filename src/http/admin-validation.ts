import type { FastifySchema, FastifySchemaCompiler, SafePromiseLike } from 'fastify';
import type { TSchema } from 'typebox';
import type * as TypeBoxCompile from 'typebox/compile';
import { errors, type HeraldError } from '../domain/errors.js';
import { unstorableText } from '../domain/storable-text.js';

/**
 * Request checks of the management API: the route's own TypeBox schema, so the document and the
 * check are one. The schemas hold only shapes (which fields, of which type); what a value must be
 * (a project name's characters, an address) is the services' to say, in the words the CLI and the
 * dashboard use for the same input. A refusal names the first field at fault:
 * `Unknown field 'x'`, `Missing 'subject'`, `Invalid 'quota' (a whole number or "unlimited")`.
 */

interface SchemaError {
  readonly keyword: string;
  readonly schemaPath: string;
  readonly instancePath: string;
  readonly params: Record<string, unknown>;
}

type Part = 'body' | 'querystring' | 'params' | 'headers';

/** A name from the request, safe to put in an error (logs and the database store errors). */
function shown(name: string): string {
  // eslint-disable-next-line no-control-regex -- control characters must not reach the logs
  const clean = name.replace(/[\u0000-\u001f\u007f]/g, '?');
  return clean.length > 100 ? `${clean.slice(0, 100)}…` : clean;
}

/** `/locales/fr/subject` → `locales.fr.subject` (JSON Pointer, RFC 6901). */
function fieldOf(pointer: string, last?: string): string {
  const parts = pointer === '' ? [] : pointer.slice(1).split('/');
  const names = parts.map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  return shown([...names, ...(last === undefined ? [] : [last])].join('.'));
}

/** The schema a `#/properties/quota/anyOf/0` path points at. */
function schemaAt(root: unknown, path: string): Record<string, unknown> {
  let node = root as Record<string, unknown>;
  for (const key of path.replace(/^#\/?/, '').split('/').filter(Boolean)) {
    const next = node[key] as Record<string, unknown> | undefined;
    if (next === undefined || typeof next !== 'object') break;
    node = next;
  }
  return node;
}

const TYPES: Record<string, string> = {
  string: 'a string',
  integer: 'a whole number',
  number: 'a number',
  boolean: 'true or false',
  null: 'null',
  object: 'an object',
  array: 'a list',
};

function oneOf(options: readonly string[]): string {
  return options.length <= 1 ? (options[0] ?? '') : `${options.slice(0, -1).join(', ')} or ${options.at(-1)}`;
}

/** What a schema accepts, in words: `a whole number or "unlimited"`. */
export function expected(schema: Record<string, unknown>): string {
  if (Array.isArray(schema.anyOf))
    return oneOf(schema.anyOf.map((s) => expected(s as Record<string, unknown>)));
  if ('const' in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return oneOf(schema.enum.map((v) => JSON.stringify(v)));
  if (schema.type === 'array' && typeof schema.items === 'object' && schema.items !== null)
    return `a list of ${expected(schema.items as Record<string, unknown>).replace(/^an? /, '')}s`;
  return TYPES[String(schema.type)] ?? 'another value';
}

/** The message for the first problem of a request part the schema refused. */
export function describeErrors(schema: unknown, found: readonly SchemaError[], part: Part): string {
  const noun = part === 'body' ? 'field' : 'parameter';
  const unknown = found.find((e) => e.keyword === 'additionalProperties');
  if (unknown !== undefined) {
    const names = unknown.params.additionalProperties as string[];
    return `Unknown ${noun} '${fieldOf(unknown.instancePath, names[0])}'`;
  }
  const missing = found.find((e) => e.keyword === 'required');
  if (missing !== undefined) {
    const names = missing.params.requiredProperties as string[];
    return `Missing ${noun === 'field' ? '' : 'parameter '}'${fieldOf(missing.instancePath, names[0])}'`;
  }
  const first = found[0];
  if (first === undefined) return 'Invalid request';
  if (first.instancePath === '' && part === 'body') return 'Request body must be a JSON object';
  // Of the errors about that value, the one nearest the root of the schema says what it may be
  // (for a union: the union, not its first member).
  const about = found
    .filter((e) => e.instancePath === first.instancePath)
    .reduce((a, b) => (b.schemaPath.length < a.schemaPath.length ? b : a));
  return `Invalid '${fieldOf(first.instancePath)}' (${expected(schemaAt(schema, about.schemaPath))})`;
}

/** The first string (or key) of a request that cannot be stored as sent, with why (storable-text.ts). */
export function unstorablePath(value: unknown): { path: string; problem: string } | null {
  const stack: [unknown, string][] = [[value, '']];
  while (stack.length > 0) {
    const [node, path] = stack.pop()!;
    if (typeof node === 'string') {
      const found = unstorableText(node);
      if (found !== null) return { path, problem: found };
    } else if (typeof node === 'object' && node !== null) {
      for (const [key, child] of Object.entries(node)) {
        const at = path === '' ? key : `${path}.${key}`;
        const found = unstorableText(key);
        if (found !== null) return { path: at, problem: found };
        stack.push([child, at]);
      }
    }
  }
  return null;
}

type Compiler = typeof TypeBoxCompile;

/**
 * TypeBox's compiler, loaded when the management API is first called: it is some 300 modules, and
 * a process that never serves the management API (most of them) should not hold them.
 */
let compiler: Compiler | null = null;
let loading: Promise<Compiler> | null = null;

/**
 * Fastify takes a check's rejection for a refusal (400): a failure of Herald's own (loading the
 * compiler, a check that throws) is marked a 500, as it is once the compiler is loaded.
 */
function ownFailure(err: unknown): Error {
  return Object.assign(err instanceof Error ? err : new Error(String(err)), { statusCode: 500 });
}

function loadCompiler(): Promise<Compiler> {
  loading ??= import('typebox/compile').then(
    (loaded) => (compiler = loaded),
    (err: unknown) => {
      loading = null;
      throw ownFailure(err);
    },
  );
  return loading;
}

type Outcome = { value: unknown } | { error: HeraldError };

/**
 * Fastify's validator compiler for the admin routes: TypeBox's compiled check of each part. Until
 * the compiler is loaded a check answers with a promise, which Fastify awaits (a refusal rejects
 * with the same error the synchronous check returns).
 */
export const adminValidator: FastifySchemaCompiler<FastifySchema> = ({ schema, httpPart }) => {
  const part = (httpPart ?? 'body') as Part;
  let check: ReturnType<Compiler['Compile']> | null = null;
  const validate = (loaded: Compiler, data: unknown): Outcome => {
    check ??= loaded.Compile(schema as TSchema);
    if (!check.Check(data)) {
      const found = [...check.Errors(data)] as unknown as SchemaError[];
      return { error: errors.invalidField(describeErrors(schema, found, part)) };
    }
    const unstorable = unstorablePath(data);
    if (unstorable !== null)
      return { error: errors.invalidField(`Invalid '${shown(unstorable.path)}' (${unstorable.problem})`) };
    return { value: data };
  };
  return (data: unknown): Outcome | SafePromiseLike<true> => {
    if (compiler !== null) return validate(compiler, data);
    const first = loadCompiler().then((loaded) => {
      let outcome: Outcome;
      try {
        outcome = validate(loaded, data);
      } catch (err) {
        throw ownFailure(err);
      }
      if ('error' in outcome) throw outcome.error;
      return true as const;
    });
    return first as unknown as SafePromiseLike<true>;
  };
};
