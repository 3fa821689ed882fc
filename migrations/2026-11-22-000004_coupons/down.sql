DROP TABLE coupons;
