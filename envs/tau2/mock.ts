import { construct, dict, list, literal, model, opt, str, type Obj } from './model.js';
import { pyStr } from './python-format.js';
import { Tau2Db, TRANSFER_TOOL, valueError as err, type ToolDef } from './toolkit.js';

/** tau2 mock: a task-list DB for the agent and a notification inbox the simulated user can use. */
const TaskStatus = literal('pending', 'completed');
const Task = model('Task', [
  ['task_id', str],
  ['title', str],
  ['description', opt(str), null],
  ['status', TaskStatus],
]);
const User = model('User', [
  ['user_id', str],
  ['name', str],
  ['tasks', list(str)],
]);
const Notification = model('Notification', [
  ['notification_id', str],
  ['message', str],
  ['status', literal('unread', 'read'), 'unread'],
  ['task_id', opt(str), null],
]);
export const MockDB = model('MockDB', [
  ['tasks', dict(Task)],
  ['users', dict(User)],
]);
export const MockUserDB = model('MockUserDB', [['notifications', dict(Notification), new Map()]]);

type TaskT = { status: string } & Obj;
type UserT = { tasks: string[] } & Obj;

const task = (db: Tau2Db, id: unknown): TaskT => {
  return db.get<TaskT>('tasks', id, `Task ${pyStr(id)} not found`);
};
const userOrFail = (db: Tau2Db, id: unknown) => {
  if (!db.table('users').has(id as string)) throw err(`User ${pyStr(id)} not found`);
};
const notification = (db: Tau2Db, id: unknown): { status: string } => {
  return db.get<{ status: string }>('notifications', id, `Notification ${pyStr(id)} not found`);
};

export const mockTools: ToolDef<Tau2Db>[] = [
  {
    name: 'create_task',
    type: 'write',
    returns: Task,
    params: [{ name: 'user_id' }, { name: 'title' }, { name: 'description', optional: true }],
    run(db, a) {
      userOrFail(db, a.user_id);
      const id = `task_${db.table('tasks').size + 1}`;
      const t = construct(Task, { task_id: id, title: a.title, description: a.description ?? null, status: 'pending' });
      db.insert('tasks', id, t);
      db.own<UserT>('users', a.user_id as string).tasks.push(id);
      return t;
    },
  },
  { name: 'get_users', type: 'read', returns: list(User), params: [], run: (db) => [...db.table('users').values()] },
  {
    name: 'update_task_status',
    type: 'write',
    returns: Task,
    params: [{ name: 'task_id' }, { name: 'status' }],
    run(db, a) {
      task(db, a.task_id);
      const t = db.own<TaskT>('tasks', a.task_id as string);
      t.status = a.status as string;
      return t;
    },
  },
  TRANSFER_TOOL,
];

/** Non-tool helpers that tasks call through `initialization_actions` and `env_assertions`. */
export const mockFunctions: Record<string, (db: Tau2Db, a: Obj) => unknown> = {
  assert_number_of_tasks(db, a) {
    userOrFail(db, a.user_id);
    return db.table<UserT>('users').get(a.user_id as string)!.tasks.length === a.expected_number;
  },
  assert_task_status: (db, a) => task(db, a.task_id).status === a.expected_status,
};

export const mockUserTools: ToolDef<Tau2Db>[] = [
  {
    name: 'check_notifications',
    type: 'read',
    returns: list(Notification),
    params: [],
    run: (db) => [...db.table('notifications').values()],
  },
  {
    name: 'dismiss_notification',
    type: 'write',
    returns: str,
    params: [{ name: 'notification_id' }],
    run(db, a) {
      notification(db, a.notification_id);
      db.own<{ status: string }>('notifications', a.notification_id as string).status = 'read';
      return `Notification ${pyStr(a.notification_id)} dismissed`;
    },
  },
];

export const mockUserFunctions: Record<string, (db: Tau2Db, a: Obj) => unknown> = {
  add_notification(db, a) {
    const n = construct(Notification, {
      notification_id: a.notification_id,
      message: a.message,
      task_id: a.task_id ?? null,
    });
    db.insert('notifications', a.notification_id as string, n);
    return n;
  },
  assert_notification_status: (db, a) => notification(db, a.notification_id).status === a.expected_status,
};
