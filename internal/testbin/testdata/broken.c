int main(void) { return not_declared; }
