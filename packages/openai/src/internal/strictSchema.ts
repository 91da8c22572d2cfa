// Strict function calling (`strict: true`) constrains the model's arguments to
// the schema exactly, but only accepts schemas in which every object lists all
// its properties as required and forbids others. An optional property is
// therefore sent as required-but-nullable, and a `null` the model sends for it
// is dropped again before the arguments reach the tool's zod schema (which
// says optional, not nullable).

type Schema = Record<string, unknown>;

const isRec = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The schema without its `$schema` marker (some servers refuse unknown top-level keys). */
export function withoutDialect(schema: Readonly<Schema>): Schema {
  const { $schema: _, ...rest } = schema;
  return rest;
}

/** A copy of `schema` that strict mode accepts; see the note at the top of this file. */
export function toStrictSchema(schema: Readonly<Schema>): Schema {
  return strictNode(withoutDialect(schema));
}

function strictNode(node: unknown): Schema {
  if (!isRec(node)) return node as Schema;
  const out: Schema = { ...node };
  if (isRec(node.properties)) {
    const required = new Set(Array.isArray(node.required) ? (node.required as string[]) : []);
    const properties: Schema = {};
    for (const [key, value] of Object.entries(node.properties)) {
      const strict = strictNode(value);
      properties[key] = required.has(key) || allowsNull(strict) ? strict : { anyOf: [strict, { type: 'null' }] };
    }
    out.properties = properties;
    out.required = Object.keys(properties);
    out.additionalProperties = false;
  } else if (node.type === 'object' && node.additionalProperties === undefined) {
    out.properties = {};
    out.required = [];
    out.additionalProperties = false;
  }
  if (node.items !== undefined)
    out.items = Array.isArray(node.items) ? node.items.map(strictNode) : strictNode(node.items);
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    if (Array.isArray(node[key])) out[key] = (node[key] as unknown[]).map(strictNode);
  }
  for (const key of ['$defs', 'definitions'] as const) {
    const defs = node[key];
    if (isRec(defs)) out[key] = Object.fromEntries(Object.entries(defs).map(([k, v]) => [k, strictNode(v)]));
  }
  return out;
}

function allowsNull(schema: unknown): boolean {
  if (!isRec(schema)) return false;
  if (schema.type === 'null' || (Array.isArray(schema.type) && schema.type.includes('null'))) return true;
  const anyOf = schema.anyOf ?? schema.oneOf;
  return Array.isArray(anyOf) && anyOf.some(allowsNull);
}

/**
 * The arguments a strict call produced, with the `null`s strict mode forced
 * on optional properties removed (walks `value` alongside the original,
 * non-strict `schema`; a property that allows `null` itself keeps it).
 */
export function dropStrictNulls(value: unknown, schema: unknown): unknown {
  if (!isRec(schema)) return value;
  if (Array.isArray(value)) {
    const items = schema.items;
    return isRec(items) ? value.map((v) => dropStrictNulls(v, items)) : value;
  }
  if (!isRec(value)) return value;
  const branches = schema.anyOf ?? schema.oneOf;
  if (!isRec(schema.properties)) {
    // One object branch of a union is the likely shape; more than one is ambiguous: leave it.
    const objects = Array.isArray(branches) ? branches.filter((b) => isRec(b) && isRec(b.properties)) : [];
    return objects.length === 1 ? dropStrictNulls(value, objects[0]) : value;
  }
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const out: Schema = {};
  for (const [key, v] of Object.entries(value)) {
    const propSchema = schema.properties[key];
    if (v === null && !required.has(key) && !allowsNull(propSchema)) continue;
    out[key] = dropStrictNulls(v, propSchema);
  }
  return out;
}
