"""A FastAPI app as its tutorial writes one: a pydantic model list endpoint. Served by
uvicorn in the truth corpus."""
from fastapi import FastAPI
from pydantic import BaseModel

app = FastAPI()


class Order(BaseModel):
    id: int
    customer: str
    total: float


ORDERS = [Order(id=i, customer=f"c{i % 97}", total=(i * 37) % 1000 / 10) for i in range(2000)]


@app.get("/orders")
def orders() -> list[Order]:
    return sorted(ORDERS, key=lambda o: o.total, reverse=True)[:200]
