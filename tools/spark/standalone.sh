# A Spark standalone cluster on 127.0.0.1 for scripts to source (tools/spark/cluster.sh,
# benches/spark_scale.sh): `start_standalone WORK WORKERS CORES MEMORY` starts a master and
# WORKERS workers (CORES cores and MEMORY each) from the pyspark install of $venv (set by the
# caller), logs and work folders under WORK, and sets STANDALONE_MASTER; `stop_standalone`
# stops exactly the processes it started. Needs $venv/bin/python with pyspark.
STANDALONE_PIDS=()
STANDALONE_MASTER=""

free_port() { "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_standalone() {
  local work="$1" workers="$2" cores="$3" memory="$4"
  local spark_home port i
  spark_home="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
  export SPARK_HOME="$spark_home" SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$work/logs"
  mkdir -p "$work"
  port="$(free_port)"
  STANDALONE_MASTER="spark://127.0.0.1:$port"
  "$spark_home/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$port" --webui-port "$(free_port)" > "$work/master.log" 2>&1 &
  STANDALONE_PIDS+=($!)
  for i in $(seq "$workers"); do
    mkdir -p "$work/worker$i"
    "$spark_home/bin/spark-class" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores "$cores" --memory "$memory" \
      --work-dir "$work/worker$i" --webui-port "$(free_port)" "$STANDALONE_MASTER" > "$work/worker$i.log" 2>&1 &
    STANDALONE_PIDS+=($!)
  done
  local registered
  for _ in $(seq 120); do
    registered=$(grep -c "Registering worker" "$work/master.log" 2> /dev/null) || registered=0
    if [ "$registered" -ge "$workers" ]; then
      return 0
    fi
    sleep 0.5
  done
  echo "the $workers workers did not register with $STANDALONE_MASTER:" >&2
  tail -20 "$work"/*.log >&2
  return 1
}

stop_standalone() {
  local pid
  for pid in "${STANDALONE_PIDS[@]}"; do
    kill "$pid" 2> /dev/null || true
  done
  for pid in "${STANDALONE_PIDS[@]}"; do
    wait "$pid" 2> /dev/null || true
  done
  STANDALONE_PIDS=()
}
