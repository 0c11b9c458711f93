FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 OPS_VAR_DIR=/var/lib/ops-console
WORKDIR /app
COPY pyproject.toml requirements.lock README.md ./
COPY ops_console ops_console
COPY fleet fleet
COPY diagnostics diagnostics
COPY incidents incidents
COPY templates templates
COPY static static
COPY manage.py Procfile ./
RUN pip install --no-cache-dir --constraint requirements.lock . \
    && mkdir -p "$OPS_VAR_DIR" \
    && PRODUCTION=true SECRET_KEY=build-only-$(head -c 48 /dev/urandom | base64) python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "ops_console.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
