// The TSDoc of the public exports is checked (issue 12: "every public export
// has TSDoc (what, when, gotchas, an example that compiles), with no
// references to other projects"). Every public export of the entries below has
// a TSDoc comment with an `@example` holding a ```ts block, and names no other
// project; and every such block compiles. Each block is written to a
// temporary .ts file inside the test package (so `@troupe/*` and zod resolve
// as they do for the tests) after a prelude: an import of every export of its
// package's entry, zod's `z`, and the few free names below; then all are
// type-checked in one program under the test package's strict options.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const testRoot = join(root, 'test');

/** The public entries: the specifier users import and its source file. */
const entries = [
  ['@troupe/core', 'packages/core/src/index.ts'],
  ['@troupe/core/testing', 'packages/core/src/testing/index.ts'],
  ['@troupe/supervisor', 'packages/supervisor/src/index.ts'],
  ['@troupe/supervisor/testing', 'packages/supervisor/src/testing/index.ts'],
  ['@troupe/subagent', 'packages/subagent/src/index.ts'],
  ['@troupe/openai', 'packages/openai/src/index.ts'],
  ['@troupe/ai-sdk', 'packages/ai-sdk/src/index.ts'],
  ['@troupe/mcp', 'packages/mcp/src/index.ts'],
  ['@troupe/sqlite', 'packages/sqlite/src/index.ts'],
  ['@troupe/postgres', 'packages/postgres/src/index.ts'],
  ['@troupe/otel', 'packages/otel/src/index.ts'],
  ['@troupe/bullmq', 'packages/bullmq/src/index.ts'],
  ['@troupe/bullmq/testing', 'packages/bullmq/src/testing/index.ts'],
] as const;

/**
 * Free names an example may use without declaring them: what a caller of the
 * documented API already has in hand. Kept small; anything else an example
 * needs, it makes or imports itself.
 */
const freeNames: Readonly<Record<string, string>> = {
  model: "declare const model: import('@troupe/core').Model;",
  agent: "declare const agent: import('@troupe/core').Agent;",
  supervisor: "declare const supervisor: import('@troupe/supervisor').Supervisor;",
};

/** The names an example declares or imports at its top level (the prelude leaves those to it). */
function declaredNames(code: string): Set<string> {
  const names = new Set<string>();
  const add = (name: ts.BindingName | ts.Identifier | undefined): void => {
    if (name === undefined) return;
    if (ts.isIdentifier(name)) names.add(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) add(element.name);
  };
  for (const statement of ts.createSourceFile('example.ts', code, ts.ScriptTarget.ES2022).statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      add(clause?.name);
      const bindings = clause?.namedBindings;
      if (bindings !== undefined && ts.isNamespaceImport(bindings)) add(bindings.name);
      else for (const element of bindings?.elements ?? []) add(element.name);
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) add(declaration.name);
    } else if (
      ts.isFunctionDeclaration(statement) ||
      ts.isClassDeclaration(statement) ||
      ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) ||
      ts.isEnumDeclaration(statement)
    ) {
      add(statement.name);
    }
  }
  return names;
}

/** Names of other projects a TSDoc comment must not mention (say what our code does instead). */
const otherProjects = /\b(nous|sagents|toolnexus|xstate|comlink|langgraph|mastra)\b/i;

interface Export {
  readonly entry: string;
  readonly name: string;
  /** Where its declaration is, `path:line`, relative to the repository. */
  readonly at: string;
  /** Its TSDoc comments, as written. */
  readonly docs: readonly string[];
  /** The ```ts blocks of its `@example` tags, with the margin (` * `) taken off. */
  readonly examples: readonly string[];
  /** How many `@example` tags it has (each must hold a ```ts block). */
  readonly exampleTags: number;
  readonly isType: boolean;
}

/** Strips a JSDoc margin: the leading `/**`, ` * ` of each line and the closing `*\/`. */
function unmargin(text: string): string {
  return text
    .replace(/^\/\*\*/, '')
    .replace(/\*\/$/, '')
    .split('\n')
    .map((line) => line.replace(/^\s*\* ?/, ''))
    .join('\n');
}

function compilerOptions(): ts.CompilerOptions {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(testRoot, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => assert.fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    },
  );
  assert.ok(parsed !== undefined, 'test/tsconfig.json parses');
  const { composite: _c, incremental: _i, tsBuildInfoFile: _t, rootDir: _r, outDir: _o, ...options } = parsed.options;
  return { ...options, noEmit: true, declaration: false, declarationMap: false, sourceMap: false };
}

function collectExports(program: ts.Program): Export[] {
  const checker = program.getTypeChecker();
  const found: Export[] = [];
  for (const [entry, file] of entries) {
    const source = program.getSourceFile(join(root, file));
    assert.ok(source !== undefined, `${file} is in the program`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    assert.ok(moduleSymbol !== undefined, `${file} is a module`);
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const declarations = symbol.declarations ?? [];
      const seen = new Set<ts.Node>();
      const docs: string[] = [];
      const examples: string[] = [];
      let exampleTags = 0;
      for (const declaration of declarations) {
        for (const doc of ts.getJSDocCommentsAndTags(declaration)) {
          if (!ts.isJSDoc(doc) || seen.has(doc)) continue;
          seen.add(doc);
          const text = doc.getText();
          docs.push(text);
          for (const tag of doc.tags ?? []) {
            if (tag.tagName.text !== 'example') continue;
            exampleTags++;
            const body = unmargin(text.slice(tag.getStart() - doc.getStart(), tag.getEnd() - doc.getStart()));
            for (const m of body.matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```/gm)) examples.push(m[1] ?? '');
          }
        }
      }
      const first = declarations[0];
      const at =
        first === undefined
          ? file
          : `${relative(root, first.getSourceFile().fileName)}:${first.getSourceFile().getLineAndCharacterOfPosition(first.getStart()).line + 1}`;
      const isType = (symbol.flags & ts.SymbolFlags.Value) === 0;
      found.push({ entry, name: exported.name, at, docs, examples, exampleTags, isType });
    }
  }
  return found;
}

const options = compilerOptions();
const sources = ts.createProgram({ rootNames: entries.map(([, file]) => join(root, file)), options });
const exported = collectExports(sources);

it('finds the public exports of every entry', () => {
  for (const [entry] of entries) {
    assert.ok(
      exported.some((e) => e.entry === entry),
      `${entry} has exports`,
    );
  }
  assert.ok(exported.length >= 200, `${exported.length} public exports`);
});

it('every public export has TSDoc with an @example holding a ```ts block, naming no other project', () => {
  const problems: string[] = [];
  for (const e of exported) {
    const where = `${e.entry} ${e.name} (${e.at})`;
    if (e.docs.join('').trim() === '') problems.push(`${where}: no TSDoc`);
    else if (e.exampleTags === 0) problems.push(`${where}: no @example`);
    else if (e.examples.length < e.exampleTags) problems.push(`${where}: an @example without a \`\`\`ts block`);
    const named = otherProjects.exec(e.docs.join('\n'));
    if (named !== null) problems.push(`${where}: names another project (${named[0]})`);
  }
  assert.equal(problems.length, 0, `${problems.length} exports:\n${problems.join('\n')}`);
});

it('every @example of a public export compiles', () => {
  const dir = mkdtempSync(join(testRoot, '.tsdoc-examples-'));
  try {
    const files = new Map<string, { readonly export: Export; readonly preludeLines: number }>();
    let n = 0;
    for (const e of exported) {
      for (const example of e.examples) {
        // The prelude: the entry's exports, zod's `z` and the free names, less what the example declares itself.
        const own = declaredNames(example);
        const imports = exported
          .filter((x) => x.entry === e.entry && !own.has(x.name))
          .map((x) => (x.isType ? `type ${x.name}` : x.name));
        const prelude = [
          `import { ${imports.join(', ')} } from '${e.entry}';`,
          ...(own.has('z') ? [] : ["import { z } from 'zod';"]),
          ...Object.entries(freeNames)
            .filter(([name]) => !own.has(name))
            .map(([, line]) => line),
          '',
        ].join('\n');
        const file = join(dir, `${String(++n).padStart(3, '0')}-${e.name}.ts`);
        writeFileSync(file, `${prelude}${example}\nexport {};\n`);
        files.set(file, { export: e, preludeLines: prelude.split('\n').length - 1 });
      }
    }
    assert.ok(files.size > 0, 'the exports have examples');
    const program = ts.createProgram({ rootNames: [...files.keys()], options, oldProgram: sources });
    const failures: string[] = [];
    for (const [file, { export: e, preludeLines }] of files) {
      const source = program.getSourceFile(file);
      assert.ok(source !== undefined);
      for (const d of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
        const line = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line + 1 - preludeLines;
        const message = ts.flattenDiagnosticMessageText(d.messageText, '\n  ');
        failures.push(`${e.entry} ${e.name} (${e.at}), example line ${line}: TS${d.code} ${message}`);
      }
    }
    assert.equal(failures.length, 0, `${failures.length} diagnostics:\n${failures.join('\n')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
