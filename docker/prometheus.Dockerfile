# Prometheus from Debian's package, for docker/compose.yaml's profile
# monitoring: scrapes nginx's admin listener and accountd's metrics
# (docker/prometheus.yml).  Grafana is in no Debian archive: import
# docker/grafana/llmgw-dashboard.json into a Grafana of one's own.
#
# Built from the repository root: docker build -f docker/prometheus.Dockerfile .

FROM debian:12-slim

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o prometheus -g prometheus -m 0755 /var/lib/prometheus

COPY docker/prometheus.yml /etc/prometheus/prometheus.yml

USER prometheus

EXPOSE 9090

CMD ["prometheus", "--config.file=/etc/prometheus/prometheus.yml", \
     "--storage.tsdb.path=/var/lib/prometheus/metrics2", \
     "--web.listen-address=0.0.0.0:9090"]
