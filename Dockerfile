# syntax=docker/dockerfile:1.7
# One Dockerfile, one image per process. Build a target:
#   docker build --target api        -t stowage/api:dev .
#   docker build --target worker     -t stowage/worker:dev .
#   docker build --target node-agent -t stowage/node-agent:dev .
#   docker build --target kube-sim   -t stowage/kube-sim:dev .
# Stages: base (node + pnpm) → fetch (dependencies from the lockfile only, cached until the
# lockfile changes) → build (offline install, tsc through turbo) → deploy-<service> (`pnpm
# deploy --prod`: the service, its workspace packages and production dependencies only) →
# <service> (runtime: no pnpm, no sources, no dev dependencies, non-root).

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS base
ENV PNPM_HOME=/pnpm \
    PATH=/pnpm:$PATH \
    npm_config_store_dir=/pnpm/store \
    COREPACK_ENABLE_DOWNLOAD_PROMPT=0 \
    CI=true \
    TURBO_TELEMETRY_DISABLED=1
RUN corepack enable pnpm && corepack prepare pnpm@12.4.2 --activate
WORKDIR /repo

# Only the lockfile and workspace settings: this layer is rebuilt when dependencies change,
# not when code does.
FROM base AS fetch
COPY pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
RUN --mount=type=cache,id=stowage-pnpm-store,target=/pnpm/store pnpm fetch

FROM fetch AS build
COPY . .
RUN --mount=type=cache,id=stowage-pnpm-store,target=/pnpm/store pnpm install --frozen-lockfile --offline
RUN pnpm run build

# --legacy: the workspace links its packages instead of injecting them (no
# inject-workspace-packages setting), which the non-legacy deploy requires.
FROM build AS deploy-api
RUN --mount=type=cache,id=stowage-pnpm-store,target=/pnpm/store pnpm --filter @stowage/api --prod deploy --legacy /out

FROM build AS deploy-worker
RUN --mount=type=cache,id=stowage-pnpm-store,target=/pnpm/store pnpm --filter @stowage/worker --prod deploy --legacy /out

FROM build AS deploy-node-agent
RUN --mount=type=cache,id=stowage-pnpm-store,target=/pnpm/store pnpm --filter @stowage/node-agent --prod deploy --legacy /out

FROM build AS deploy-kube-sim
RUN --mount=type=cache,id=stowage-pnpm-store,target=/pnpm/store pnpm --filter @stowage/kube-sim --prod deploy --legacy /out

# Common runtime: an unprivileged user (uid/gid 10001, as in k8s/) and the directories the
# processes write to, owned by it (a fresh named volume mounted there inherits the owner).
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
RUN groupadd --system --gid 10001 stowage \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin stowage \
 && mkdir -p /var/lib/stowage/backups /var/lib/stowage/kube /var/lib/stowage/sim \
 && chown -R 10001:10001 /var/lib/stowage
WORKDIR /app
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]

# The code belongs to root and is read-only to the process.
FROM runtime AS api
COPY --from=deploy-api /out /app
ENV PORT=8080
EXPOSE 8080
USER 10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

FROM runtime AS worker
COPY --from=deploy-worker /out /app
ENV PORT=8081
EXPOSE 8081
USER 10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8081) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# In Kubernetes the node agent runs as uid 0 with only the capabilities it needs
# (k8s/base/node-agent.yaml); the image default stays unprivileged. The same image is the
# `stowage-restore-wait` init container of restored pods: `node /app/dist/restore-wait.js`
# (restoreWaitContainer.command in @stowage/kube).
FROM runtime AS node-agent
COPY --from=deploy-node-agent /out /app
ENV PORT=8082
EXPOSE 8082
USER 10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8082) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

FROM runtime AS kube-sim
# The simulator makes its TLS certificate with openssl at start (kubectl sends credentials only over TLS).
RUN apt-get update && apt-get install -y --no-install-recommends openssl && rm -rf /var/lib/apt/lists/*
COPY --from=deploy-kube-sim /out /app
EXPOSE 6443 6444
USER 10001
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:6443/version').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
