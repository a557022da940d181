export { createAccountsService, type AccountsService, type UserView } from './accounts.service';
