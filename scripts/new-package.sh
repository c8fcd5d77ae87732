#!/usr/bin/env bash
# Creates the skeleton of a workspace package: scripts/new-package.sh packages/NAME "description"
set -euo pipefail
dir=$1; desc=$2; name=@stowage/$(basename "$dir")
mkdir -p "$dir/src" "$dir/test"
[ -f "$dir/package.json" ] || cat > "$dir/package.json" <<JSON
{
  "name": "$name",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "description": "$desc",
  "exports": {
    ".": {
      "@stowage/source": "./src/index.ts",
      "types": "./dist/index.d.ts",
      "default": "./dist/index.js"
    }
  },
  "scripts": {
    "build": "tsc -p tsconfig.build.json",
    "typecheck": "tsc --noEmit"
  },
  "dependencies": {}
}
JSON
[ -f "$dir/tsconfig.json" ] || cat > "$dir/tsconfig.json" <<JSON
{
  "extends": "../../tsconfig.base.json",
  "compilerOptions": { "outDir": "dist", "rootDir": "." },
  "include": ["src", "test"]
}
JSON
[ -f "$dir/tsconfig.build.json" ] || cat > "$dir/tsconfig.build.json" <<JSON
{
  "extends": "./tsconfig.json",
  "compilerOptions": { "rootDir": "src", "noEmit": false },
  "include": ["src"],
  "exclude": ["src/**/*.test.ts"]
}
JSON
