DROP TABLE partner_prices;
DROP TABLE catalog_products;
