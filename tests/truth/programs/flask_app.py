"""A Flask app as its tutorial writes one: a JSON endpoint over an in-memory table, rendered
with Jinja. Served by gunicorn in the truth corpus."""
from flask import Flask, jsonify, render_template_string

app = Flask(__name__)
ORDERS = [{"id": i, "customer": f"c{i % 97}", "total": (i * 37) % 1000 / 10} for i in range(2000)]
PAGE = "<ul>{% for o in orders %}<li>{{ o.id }} {{ o.customer }} {{ '%.2f' % o.total }}</li>{% endfor %}</ul>"


@app.get("/orders")
def orders():
    top = sorted(ORDERS, key=lambda o: o["total"], reverse=True)[:200]
    return render_template_string(PAGE, orders=top)


@app.get("/orders.json")
def orders_json():
    return jsonify(ORDERS[:200])
