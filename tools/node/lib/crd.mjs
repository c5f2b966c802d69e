// Validates Kubernetes objects against a CustomResourceDefinition the way the
// API server does, as far as a test needs: routing (apiVersion, kind), object
// metadata, the structural OpenAPI v3 schema (with ajv: defaults applied,
// unknown fields refused as `kubectl apply`'s strict field validation does,
// x-kubernetes-* extensions, nullable, int-or-string translated), then every
// CEL rule in x-kubernetes-validations (with @marcbachmann/cel-js), `self`
// bound to the value at that schema node and `oldSelf` to the old value for
// transition rules. Errors are strings "<field path>: <problem>".
import Ajv from 'ajv'
import {evaluate} from '@marcbachmann/cel-js'
import {readFileSync} from 'node:fs'
import {parseAllDocuments} from 'yaml'

// Every YAML document of a file as plain JS; throws on syntax errors and
// duplicate keys (YAML 1.2 core schema, as the API server's sigs.k8s.io/yaml).
export function loadYamlDocuments(text, source = '<text>') {
  const docs = parseAllDocuments(text, {uniqueKeys: true, prettyErrors: true, version: '1.2'})
  const out = []
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`${source}: ${doc.errors[0].message}`)
    const js = doc.toJS({maxAliasCount: 100})
    if (js !== null && js !== undefined) out.push(js)
  }
  return out
}

export function loadYamlFile(path) {
  return loadYamlDocuments(readFileSync(path, 'utf8'), path)
}

const KEEP = ['type', 'enum', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum',
  'minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties',
  'required', 'pattern', 'default', 'format', 'uniqueItems', 'multipleOf']

// OpenAPI v3 structural schema -> JSON schema for ajv.
export function toJsonSchema(s, isRoot = true) {
  if (typeof s !== 'object' || s === null) return s
  const out = {}
  for (const k of KEEP) if (k in s) out[k] = structuredClone(s[k])
  if (s.properties) {
    out.properties = {}
    for (const [name, sub] of Object.entries(s.properties)) {
      // The API server handles ObjectMeta itself (checkMetadata below).
      out.properties[name] = isRoot && name === 'metadata' ? {type: 'object'} : toJsonSchema(sub, false)
    }
  }
  if ('additionalProperties' in s) {
    out.additionalProperties =
      typeof s.additionalProperties === 'object' ? toJsonSchema(s.additionalProperties, false)
        : s.additionalProperties
  } else if (s.properties && !s['x-kubernetes-preserve-unknown-fields']) {
    // The API server prunes unknown fields; `kubectl apply` (strict field
    // validation, the default) refuses them. Do the latter.
    out.additionalProperties = false
  }
  if (s.items) out.items = toJsonSchema(s.items, false)
  for (const k of ['allOf', 'anyOf', 'oneOf']) {
    if (s[k]) out[k] = s[k].map((x) => toJsonSchema(x, false))
  }
  if (s.not) out.not = toJsonSchema(s.not, false)
  if (s['x-kubernetes-int-or-string']) {
    delete out.type
    out.anyOf = [{type: 'integer'}, {type: 'string'}]
  }
  if (s.nullable) {
    if (out.type) out.type = [out.type, 'null']
    if (out.enum) out.enum = [...out.enum, null]
  }
  return out
}

function newAjv() {
  const ajv = new Ajv({allErrors: true, useDefaults: true, strict: false})
  const int = (bits) => ({
    type: 'number',
    validate: (n) => Number.isInteger(n) && n >= -(2 ** (bits - 1)) && n < 2 ** (bits - 1),
  })
  ajv.addFormat('int32', int(32))
  ajv.addFormat('int64', {type: 'number', validate: (n) => Number.isInteger(n)})
  ajv.addFormat('double', {type: 'number', validate: () => true})
  ajv.addFormat('float', {type: 'number', validate: () => true})
  ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/)
  ajv.addFormat('byte', /^[A-Za-z0-9+/]*={0,2}$/)
  return ajv
}

// A JSON pointer into `data` as a Kubernetes field path: spec.a.b[0].c
function fieldPath(data, pointer, extra) {
  const parts = pointer === '' ? [] : pointer.slice(1).split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
  if (extra !== undefined) parts.push(extra)
  let path = ''
  let cur = data
  for (const p of parts) {
    if (Array.isArray(cur)) path += `[${p}]`
    else path += path === '' ? p : `.${p}`
    cur = cur == null ? undefined : cur[p]
  }
  return path || '<root>'
}

function describe(v) {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'a list'
  if (typeof v === 'object') return 'a mapping'
  return JSON.stringify(v)
}

function valueAt(data, pointer) {
  if (pointer === '') return data
  let cur = data
  for (const p of pointer.slice(1).split('/')) cur = cur == null ? undefined : cur[p.replace(/~1/g, '/').replace(/~0/g, '~')]
  return cur
}

function ajvMessage(data, e) {
  const got = describe(valueAt(data, e.instancePath))
  switch (e.keyword) {
    case 'additionalProperties':
      return `${fieldPath(data, e.instancePath, e.params.additionalProperty)}: unknown field`
    case 'required':
      return `${fieldPath(data, e.instancePath, e.params.missingProperty)}: Required value`
    case 'enum':
      return `${fieldPath(data, e.instancePath)}: Unsupported value ${got}: supported values: ${e.params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}`
    case 'type':
      return `${fieldPath(data, e.instancePath)}: Invalid value ${got}: must be of type ${e.params.type}`
    default:
      return `${fieldPath(data, e.instancePath)}: Invalid value ${got}: ${e.message}`
  }
}

// The value CEL sees: declared fields only (preserved unknown fields are not
// visible to CEL in Kubernetes), integers as CEL ints.
function celValue(schema, v) {
  if (v === null || v === undefined || schema === undefined) return v
  if (schema.type === 'integer' && typeof v === 'number' && Number.isInteger(v)) return BigInt(v)
  if (Array.isArray(v)) return schema.items ? v.map((x) => celValue(schema.items, x)) : v
  if (typeof v === 'object') {
    const out = {}
    if (schema.properties) {
      for (const [k, sub] of Object.entries(schema.properties)) if (k in v) out[k] = celValue(sub, v[k])
    }
    if (typeof schema.additionalProperties === 'object') {
      for (const [k, x] of Object.entries(v)) out[k] = celValue(schema.additionalProperties, x)
    }
    return out
  }
  return v
}

function runCel(schema, value, old, path, errors, isRoot) {
  if (value === undefined || value === null || typeof schema !== 'object') return
  for (const rule of schema['x-kubernetes-validations'] || []) {
    const transition = /\boldSelf\b/.test(rule.rule)
    if (transition && old === undefined) continue
    let ok
    try {
      const self = celValue(schema, value)
      if (isRoot && value.metadata) {
        // At the root, CEL sees metadata.name and metadata.generateName only.
        self.metadata = {}
        for (const k of ['name', 'generateName']) if (k in value.metadata) self.metadata[k] = value.metadata[k]
      }
      const vars = {self}
      if (transition) {
        vars.oldSelf = celValue(schema, old)
        if (isRoot && old.metadata) vars.oldSelf.metadata = {name: old.metadata.name}
      }
      ok = evaluate(rule.rule, vars) === true
    } catch (err) {
      errors.push(`${path || '<root>'}: CEL rule failed to evaluate (${err.message.split('\n')[0]}): ${rule.rule}`)
      continue
    }
    if (!ok) {
      const message = rule.message || `failed rule: ${rule.rule}`
      // Our messages name their field already; do not say it twice.
      errors.push(/^[\w.\[\]]+: /.test(message) ? message : `${path || '<root>'}: ${message}`)
    }
  }
  const join = (k) => (path ? `${path}.${k}` : k)
  if (Array.isArray(value)) {
    if (schema.items) value.forEach((x, i) => runCel(schema.items, x, undefined, `${path}[${i}]`, errors, false))
    return
  }
  if (typeof value !== 'object') return
  for (const [k, sub] of Object.entries(schema.properties || {})) {
    if (isRoot && k === 'metadata') continue
    runCel(sub, value[k], old && typeof old === 'object' ? old[k] : undefined, join(k), errors, false)
  }
  if (typeof schema.additionalProperties === 'object') {
    for (const [k, x] of Object.entries(value)) {
      runCel(schema.additionalProperties, x, old && typeof old === 'object' ? old[k] : undefined, join(k), errors, false)
    }
  }
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

function checkMetadata(obj, errors) {
  const m = obj.metadata
  if (m === undefined || m === null) {
    errors.push('metadata.name: Required value')
    return
  }
  if (typeof m !== 'object' || Array.isArray(m)) {
    errors.push(`metadata: Invalid value ${describe(m)}: must be a mapping`)
    return
  }
  if (m.name === undefined && m.generateName === undefined) errors.push('metadata.name: Required value')
  if (m.name !== undefined && (typeof m.name !== 'string' || m.name.length > 253 || !DNS1123_SUBDOMAIN.test(m.name))) {
    errors.push(`metadata.name: Invalid value ${describe(m.name)}: must be a DNS-1123 subdomain`)
  }
  if (m.namespace !== undefined && (typeof m.namespace !== 'string' || m.namespace.length > 63 || !DNS1123_LABEL.test(m.namespace))) {
    errors.push(`metadata.namespace: Invalid value ${describe(m.namespace)}: must be a DNS-1123 label`)
  }
  for (const k of ['labels', 'annotations']) {
    if (m[k] === undefined) continue
    if (typeof m[k] !== 'object' || m[k] === null || Array.isArray(m[k]) || Object.values(m[k]).some((v) => typeof v !== 'string')) {
      errors.push(`metadata.${k}: Invalid value: must be a mapping of strings`)
    }
  }
}

export class CrdValidator {
  constructor(crd) {
    if (crd.kind !== 'CustomResourceDefinition') throw new Error(`not a CRD: ${crd.kind}`)
    this.crd = crd
    this.group = crd.spec.group
    this.kind = crd.spec.names.kind
    this.versions = new Map()
    const ajv = newAjv()
    for (const v of crd.spec.versions) {
      const schema = v.schema.openAPIV3Schema
      this.versions.set(`${this.group}/${v.name}`, {schema, validate: ajv.compile(toJsonSchema(schema))})
    }
  }

  static fromFile(path) {
    const crds = loadYamlFile(path).filter((d) => d.kind === 'CustomResourceDefinition')
    if (crds.length !== 1) throw new Error(`${path}: expected one CustomResourceDefinition, found ${crds.length}`)
    return new CrdValidator(crds[0])
  }

  // Validates (a copy of) obj; `old` turns it into an update with transition
  // rules. Returns {errors, object} where object has the defaults applied.
  validate(obj, old = undefined) {
    const errors = []
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) {
      return {errors: [`<root>: must be a mapping, got ${describe(obj)}`], object: obj}
    }
    const object = structuredClone(obj)
    const version = this.versions.get(object.apiVersion)
    if (!version) {
      errors.push(`apiVersion: Invalid value ${describe(object.apiVersion)}: the CRD serves ${[...this.versions.keys()].join(', ')}`)
      return {errors, object}
    }
    if (object.kind !== this.kind) {
      errors.push(`kind: Invalid value ${describe(object.kind)}: must be ${this.kind}`)
      return {errors, object}
    }
    checkMetadata(object, errors)
    let oldObject
    if (old !== undefined) {
      oldObject = structuredClone(old)
      version.validate(oldObject) // defaults, as stored
    }
    if (!version.validate(object)) {
      for (const e of version.validate.errors) errors.push(ajvMessage(object, e))
      return {errors, object}  // the API server runs CEL only on schema-valid objects
    }
    runCel(version.schema, object, oldObject, '', errors, true)
    return {errors, object}
  }
}
